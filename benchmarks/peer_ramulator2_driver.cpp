// archsim's driver for the Ramulator 2 peer measurement (benchmarks/peer_ramulator2.py).
//
// Our code, not Ramulator's: a main() that links libramulator.so (Ramulator 2.1, CMU-SAFARI,
// commit c5b1c3a) through its documented C++ library API (README section 7: the External
// frontend, Config::parse_config_file, Factory::create_frontend / create_memory_system).
// Ramulator 2.1 ships no standalone binary; its own trace frontends (LoadStoreTrace,
// ReadWriteTrace) stop when the last request has been *accepted*, not completed, and
// accept one request per frontend tick. This driver replays the same trace format
// ("LD <addr>" / "ST <addr>", one per line) the way archsim's simulate_requests(...,
// max_outstanding=W) does: every request has arrived at cycle 0; each DRAM cycle the
// requests that were refused (at most W of them, oldest first) are offered again, then new
// ones in trace order until W are waiting; the run ends when the last request completes
// (read data returned, write issued).
//
// WINDOW 0 runs Ramulator's own frontend of CONFIG instead (LoadStoreTrace: one request
// offered per tick, the run ends when the last one is accepted) with the loop of its Python
// Simulation.run (src/ramulator/python/bindings.cpp); TRACE is then not read.
//
// Usage: peer_driver CONFIG.yaml TRACE WINDOW
// Prints one line "archsim-peer: ..." (counts, cycles, CPU seconds of the simulation loop
// alone), then Ramulator's own statistics (YAML).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ramulator/base/config.h"
#include "ramulator/base/factory.h"
#include "ramulator/base/request.h"
#include "ramulator/frontend/i_frontend.h"
#include "ramulator/memory_system/i_memory_system.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " CONFIG.yaml TRACE WINDOW\n";
    return 2;
  }
  const size_t window = std::stoul(argv[3]);
  std::vector<int> type;
  std::vector<Ramulator::Addr_t> addr;
  if (window > 0) {
    std::ifstream in(argv[2]);
    if (!in) {
      std::cerr << "cannot open trace " << argv[2] << "\n";
      return 2;
    }
    std::string op;
    long long a;
    while (in >> op >> a) {
      type.push_back(op == "ST" ? Ramulator::Request::Type::Write : Ramulator::Request::Type::Read);
      addr.push_back(a);
    }
  }
  const size_t n = addr.size();

  auto config = Ramulator::Config::parse_config_file(argv[1]);
  Ramulator::IFrontEnd* frontend = Ramulator::Factory::create_frontend(config);
  Ramulator::IMemorySystem* memory = Ramulator::Factory::create_memory_system(config);
  frontend->connect_memory_system(memory);
  memory->connect_frontend(frontend);
  const int tx_bytes = memory->get_tx_bytes();

  size_t done = 0, next = 0;
  long long cycles = 0;
  std::deque<size_t> waiting;
  auto on_done = [&done](Ramulator::Request&) { done++; };
  auto offer = [&](size_t i) {
    return frontend->receive_external_requests(type[i], addr[i], 0, on_done, tx_bytes);
  };

  const std::clock_t c0 = std::clock();
  if (window == 0) {  // Simulation::run of bindings.cpp
    const int fe_tick = frontend->get_clock_ratio(), mem_tick = memory->get_clock_ratio();
    int fe_count = mem_tick - 1, mem_count = fe_tick - 1;
    for (;;) {
      if (++fe_count >= mem_tick) {
        fe_count = 0;
        frontend->tick();
      }
      if (frontend->is_finished()) break;
      if (++mem_count >= fe_tick) {
        mem_count = 0;
        memory->tick();
        cycles++;
      }
    }
  }
  while (done < n) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      it = offer(*it) ? waiting.erase(it) : it + 1;
    }
    while (next < n && waiting.size() < window) {
      if (!offer(next)) waiting.push_back(next);
      next++;
    }
    memory->tick();
    cycles++;
  }
  const double loop_cpu_s = double(std::clock() - c0) / CLOCKS_PER_SEC;

  frontend->finalize();
  memory->finalize();
  std::printf("archsim-peer: requests=%zu completed=%zu cycles=%lld loop_cpu_s=%.6f\n", n, done,
              cycles, loop_cpu_s);
  std::fflush(stdout);
  memory->update_stats_recursive();
  memory->print_stats(std::cout);
  return 0;
}
