"""Collectives on a cluster: closed forms, NCCL's choices, and the 8x H100 nccl-tests figures."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from archsim.arch.cluster import load_cluster
from archsim.arch.collective import Group, collective, place
from archsim.workloads.errors import ConfigError

DATA = Path(__file__).resolve().parent.parent / "data" / "cluster"
CFG = Path(__file__).resolve().parents[2] / "configs" / "cluster"


@pytest.fixture(scope="module")
def dgx():
    return load_cluster(CFG / "dgx_h100.yaml")


def one_protocol(tmp_path: Path) -> object:
    """dgx_h100 without its ``nccl`` and ``custom_allreduce`` blocks: the one-protocol model
    (efficiency 0.8, 2 us per step) that clusters without NCCL constants use."""
    out, skip = [], False
    for line in (CFG / "dgx_h100.yaml").read_text().splitlines():
        if line.startswith(("  nccl:", "  custom_allreduce:")):
            skip = True
            continue
        if skip and line.startswith("    "):
            continue
        skip = False
        out.append(line)
    p = tmp_path / "one_protocol.yaml"
    p.write_text("\n".join(out))
    return load_cluster(p)


def _published(algo: str) -> list[dict]:
    with open(DATA / "nccl_allreduce_h100.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [r for r in rows if r["algo"] == algo]


@pytest.mark.parametrize("mib", [256, 1024, 4096, 8192])
def test_h100_ring_allreduce_busbw_within_15pct_of_nccl_tests(dgx, mib):
    # tests/data/cluster/nccl_allreduce_h100.csv: NCCL_ALGO=RING plateau on 8x H100 NVSwitch.
    # From 256 MiB: the measured curve of NCCL 2.29 (kernels_h100/nccl.csv, int8 = ring) is
    # 315 GB/s at 64 MiB, 325 at 128 MiB, 341 at 256 MiB, 351 at 512 MiB -- the plateau of
    # 370 is not reached at 64 MiB, and the model follows the measured curve
    pub = _published("ring")
    assert pub
    r = collective(dgx, "allreduce", mib * 2**20, place(dgx, 8, 1), algorithm="ring")
    for row in pub:
        if mib * 2**20 >= int(row["min_size_bytes"]):
            ref = float(row["busbw_gbps"])
            assert abs(r.busbw_gbps / ref - 1) <= 0.15, (mib, r.busbw_gbps, ref, row["source"])


def test_busbw_rises_with_message_size(dgx):
    # latency dominates small messages; "256M is too small to reach peak" (nccl-tests#212)
    bw = [collective(dgx, "allreduce", 2**k, place(dgx, 8, 1), algorithm="ring").busbw_gbps
          for k in range(10, 34)]
    assert all(b2 >= b1 * 0.999 for b1, b2 in zip(bw, bw[1:]))
    assert bw[0] < 0.05 * bw[-1]


def test_ring_allreduce_closed_form(dgx, tmp_path):
    # one protocol: 8 GPUs, 1 GiB: 2 x 7/8 x S / (450 GB/s x 0.8) + 14 x 2 us
    s = 2**30
    t = 2 * 7 / 8 * s / (450e9 * 0.8) + 14 * 2e-6
    r = collective(one_protocol(tmp_path), "allreduce", s, place(dgx, 8, 1), algorithm="ring")
    assert r.algorithm == "ring"
    assert r.time_s == pytest.approx(t, rel=1e-9)
    # NCCL's Simple protocol: 55.7 us + 14 steps x 0.78 us + 2 x 7/8 x S / (450 GB/s x 0.78)
    r = collective(dgx, "allreduce", s, place(dgx, 8, 1), algorithm="ring")
    assert (r.algorithm, r.protocol) == ("ring", "simple")
    assert r.time_s == pytest.approx(55.7e-6 + 14 * 0.78e-6 + 2 * 7 / 8 * s / (450e9 * 0.78),
                                     rel=1e-9)


def test_tree_wins_small_messages(tmp_path):
    # one protocol, 8 KiB: tree 2 x 8 KiB / B + 6 steps beats ring's 14 steps of 2 us (and
    # NVLS' 2 steps lose nothing here: 2 steps + 8 KiB / (0.562 x 450 GB/s) = 4.03 us < tree)
    dgx = one_protocol(tmp_path)
    c = collective(dgx, "allreduce", 8192, place(dgx, 8, 1))
    assert c.algorithm == "nvls"
    assert c.time_s == pytest.approx(8192 / (0.562 * 450e9) + 2 * 2e-6)
    no_nvls = collective(dgx, "allreduce", 8192, place(dgx, 8, 1), algorithm="tree")
    assert no_nvls.time_s == pytest.approx(2 * 8192 / (450e9 * 0.8) + 6 * 2e-6)


@pytest.mark.parametrize("mib", [1024, 4096, 8192])
def test_h100_nvls_busbw_published(dgx, mib):
    # nvls_efficiency (0.562) and NVLS' base are fitted on kernels_h100/nccl.csv (2+8 GPUs,
    # NCCL 2.29: 445 GB/s at 512 MiB); the published 476-480 GB/s plateau (nccl-tests#212,
    # #290) is a check within 10%; the H800 check is below
    r = collective(dgx, "allreduce", mib * 2**20, place(dgx, 8, 1))
    assert r.algorithm == "nvls"
    for row in _published("nvls"):
        assert abs(r.busbw_gbps / float(row["busbw_gbps"]) - 1) <= 0.10


def test_nvls_constant_checked_on_h800(tmp_path):
    # same NVSwitch generation, 8 instead of 18 NVLink4 links: 200 GB/s per direction
    y = (CFG / "dgx_h100.yaml").read_text().replace("bandwidth_gbps: 450", "bandwidth_gbps: 200")
    p = tmp_path / "h800.yaml"
    p.write_text(y)
    c = load_cluster(p)
    r = collective(c, "allreduce", 2**30, place(c, 8, 1))
    (row,) = _published("nvls-h800")
    assert abs(r.busbw_gbps / float(row["busbw_gbps"]) - 1) <= 0.15, (r.busbw_gbps, row)


def test_allgather_and_reducescatter_move_half_of_allreduce(dgx):
    s = 2**30
    ag = collective(dgx, "allgather", s, place(dgx, 8, 1))
    rs = collective(dgx, "reducescatter", s, place(dgx, 8, 1))
    ar = collective(dgx, "allreduce", s, place(dgx, 8, 1), algorithm="ring")
    assert ag.wire_bytes == rs.wire_bytes == pytest.approx(7 / 8 * s)
    assert ar.wire_bytes == pytest.approx(2 * ag.wire_bytes)


def test_alltoall_across_nodes_is_nic_bound(dgx):
    # 2 nodes x 8: half of each device's data leaves the node through its 50 GB/s x 0.94 NIC
    # (sjeaugey, nccl-tests#130: busbw = N/(N-1) x NIC bandwidth on N nodes)
    pod = dgx.with_nodes(2)
    s = 2**30
    r = collective(pod, "alltoall", s, place(pod, 16, 1))
    t_nic = (16 - 8) / 16 * s / (50e9 * 0.94)
    assert r.time_s == pytest.approx(t_nic + 1 * 5e-6 + 7 * 2e-6, rel=1e-9)
    assert r.algbw_gbps * 15 / 16 == pytest.approx(2 * 50 * 0.94 * 15 / 16, rel=0.01)


def test_dp_allreduce_across_nodes_uses_one_nic_per_device(dgx):
    # 8 nodes, one device of each (tp 8 inside): a ring over 8 NICs at 47 GB/s
    pod = dgx.with_nodes(8)
    g = place(pod, 8, 8)
    assert (g.local, g.nodes) == (1, 8)
    s = 2**30
    r = collective(pod, "allreduce", s, g)
    assert r.time_s == pytest.approx(2 * 7 / 8 * s / (50e9 * 0.94) + 14 * 5e-6, rel=1e-9)


def test_sharing_halves_bandwidth(dgx):
    s = 2**30
    one = collective(dgx, "allgather", s, place(dgx, 8, 1))
    two = collective(dgx, "allgather", s, place(dgx, 8, 1), share=2)
    assert one.protocol == two.protocol == "simple"
    lat = 55.7e-6 + 7 * 0.78e-6
    assert two.time_s - lat == pytest.approx(2 * (one.time_s - lat), rel=1e-9)


def test_torus_runs_rings_per_dimension(tmp_path):
    one_protocol(tmp_path)
    y = (tmp_path / "one_protocol.yaml").read_text().replace(
        "topology: switch", "topology: torus\n  torus_dims: [2, 4]")
    y = "\n".join(line for line in y.splitlines() if "nvls_efficiency" not in line)
    p = tmp_path / "torus.yaml"
    p.write_text(y)
    c = load_cluster(p)
    s = 2**30
    b = 450e9 * 0.8 / 2                      # each of 2 dimensions gets half the bandwidth
    t = (2 * 1 / 2 * s + 2 * 3 / 4 * s / 2) / b + (2 * 1 + 2 * 3) * 2e-6
    assert collective(c, "allreduce", s, Group(8, 8)).time_s == pytest.approx(t, rel=1e-9)


def test_bad_cluster_yaml_names_file_line_key(tmp_path):
    y = (CFG / "dgx_h100.yaml").read_text().replace("bandwidth_gbps: 450", "bandwidth_gbps: fast")
    y = y.replace("devices_per_node: 8", "devices_per_node: 8\nnodez: 3")
    p = tmp_path / "bad.yaml"
    p.write_text(y)
    with pytest.raises(ConfigError) as e:
        load_cluster(p)
    msg = str(e.value)
    assert "bad.yaml:" in msg and "scale_up.bandwidth_gbps" in msg and "expected number" in msg
    assert "unknown key 'nodez'" in msg


def test_unknown_device_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text((CFG / "dgx_h100.yaml").read_text().replace("gpu/h100", "gpu/h1000"))
    with pytest.raises(ConfigError, match="device.*no device design 'gpu/h1000'"):
        load_cluster(p)


@pytest.mark.parametrize("path", sorted(CFG.glob("*.yaml")), ids=lambda p: p.stem)
def test_reference_clusters_load(path):
    c = load_cluster(path)
    assert c.devices == c.spec.devices_per_node * c.spec.nodes


def test_every_cluster_key_is_documented():
    import dataclasses

    from archsim.arch.cluster import ClusterSpec, LinkSpec
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    for cls in (ClusterSpec, LinkSpec):
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in doc, f"{cls.__name__}.{f.name} missing in docs/cluster.md"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_POD = load_cluster(CFG / "h100_pod64.yaml")


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"]),
       log_size=st.integers(0, 6), log_stride=st.integers(0, 5), nbytes=st.floats(1.0, 1e10))
def test_collectives_respect_the_line_rate_and_grow_with_size(kind, log_size, log_stride,
                                                              nbytes):
    # physics: no collective beats moving its minimum traffic, (n-1)/n x S for the
    # collectives (S for send/recv), at the line rate of both levels together
    size, stride = 2**log_size, 2**log_stride
    if size * stride > 64:
        return
    g = place(_POD, size, stride) if kind != "sendrecv" else place(_POD, 2, stride)
    c = collective(_POD, kind, nbytes, g)
    n = g.size
    line = (_POD.spec.scale_up.bandwidth_gbps + _POD.spec.scale_out.bandwidth_gbps) * 1e9
    least = nbytes if kind == "sendrecv" else (n - 1) / n * nbytes
    assert c.time_s >= least / line * (1 - 1e-12)
    assert collective(_POD, kind, 2 * nbytes, g).time_s >= c.time_s
