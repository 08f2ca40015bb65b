"""`dse calibrate defaults`: a calibration file with NCCL's own parameters for the machine its flags
describe, so that `--calibration FILE` models that machine (another generation, NVLS off, a network
kind, nodes of one GPU) wherever a cost model is taken."""

from __future__ import annotations

from pathlib import Path

from dse.core.topology import parse_topology
from dse.costs.nccl.calibration import default_calibration, read_calibration
from dse.sim.evaluate import evaluate

B200 = "SW(8,900,0,links=18)_SW(4,50,0,links=1)"
BIGGER = "SW(8,900,0,links=18)_SW(16,50,0,links=1)"


def _nccl_tests_us(run_cli, *args: str) -> list[float]:
    """The time column (us) of `dse nccl-tests ARGS`."""
    code, text, err = run_cli("nccl-tests", *args)
    assert code == 0, err
    return [float(line.split()[5]) for line in text.splitlines() if line.strip()[:1].isdigit()]


def test_the_file_is_the_machine_with_nccls_parameters_and_carries_to_other_designs(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "b200.toml"
    flags = ("--generation", "blackwell", "--network", "roce", "--no-nvls")
    code, text, err = run_cli("calibrate", "defaults", "-t", B200, "-o", str(out), *flags)
    assert code == 0, err
    assert text.splitlines() == [
        f"NCCL's own parameters (nothing fitted) for {B200}: 32 GPUs (8 a node x 4 nodes), blackwell, NVLS off, "
        "roce network, NCCL 2.30.7",
        f"wrote {out}",
    ]
    calib = read_calibration(out)
    assert calib == default_calibration(parse_topology(B200), generation="blackwell", network="roce", nvls=False)
    assert calib.rows == 0 and "nothing fitted" in out.read_text().splitlines()[0]
    # on another design, the file times as the same machine flags do without it
    with_file = _nccl_tests_us(run_cli, BIGGER, "--calibration", str(out), "-b", "64K", "-e", "1G", "-f", "64")
    with_flags = _nccl_tests_us(run_cli, BIGGER, *flags, "-b", "64K", "-e", "1G", "-f", "64")
    assert with_file == with_flags and len(with_file) == 3  # 64 KiB, 4 MiB, 256 MiB
    t = evaluate(BIGGER, size=1 << 28, cost_model=f"nccl:{out}").time_ns
    assert round(t / 1000, 2) == with_file[-1]
    hopper = tmp_path / "h.toml"  # dse's default machine: the same times as `nccl` with no calibration
    assert run_cli("calibrate", "defaults", "-t", "HGX-H100", "-o", str(hopper))[0] == 0
    for size in (1 << 10, 1 << 20, 1 << 30):
        plain = evaluate("HGX-H100", size=size, cost_model="nccl").time_ns
        assert evaluate("HGX-H100", size=size, cost_model=f"nccl:{hopper}").time_ns == plain


def test_nodes_of_one_gpu_and_bad_input(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "spark.toml"
    args = ("calibrate", "defaults", "-o", str(out), "--generation", "blackwell")
    code, _, err = run_cli(*args, "-t", "SW(1,100,0)_SW(2,25,0)")
    assert code == 2 and "--single-gpu-nodes" in err and err.count("\n") == 1 and not out.exists()
    code, text, _ = run_cli(*args, "-t", "SW(2,25,0)", "--single-gpu-nodes")
    assert code == 0 and "2 GPUs (1 a node x 2 nodes)" in text
    four = _nccl_tests_us(run_cli, "SW(4,25,0)", "--calibration", str(out), "-b", "1M", "-e", "1M")
    assert four == _nccl_tests_us(
        run_cli, "SW(4,25,0)", "--single-gpu-nodes", "--generation", "blackwell", "-b", "1M", "-e", "1M"
    )
    before = out.read_bytes()
    for bad in (("--generation", "kepler"), ("--network", "myrinet"), ("--nics-per-node", "0")):
        code, _, err = run_cli("calibrate", "defaults", "-t", B200, "-o", str(out), *bad)
        assert code == 2 and err.startswith("dse: error: ") and err.count("\n") == 1, (bad, err)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["spark.toml"]
