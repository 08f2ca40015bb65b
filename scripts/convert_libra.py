#!/usr/bin/env python3
"""Convert LIBRA's inputs (Won et al., ISPASS 2024; MIT licence) into the data dse ships in dse/data/libra/.

Reads LIBRA's files as they are (dse's own readers: `dse.training.libra_read`,
`dse.explore.libra.files`) and writes, each with a line of origin:

- ``<workload>_<network>.toml``: each workload with its communicator file's placement, in dse's
  workload TOML (GPT-3, MSFT-1T, Turing-NLG and ResNet-50, on the 3D and 4D networks; DLRM has no
  communicator file and is left out);
- ``networks.toml``: each network's dimensions (kind, NPUs, price tier) and LIBRA's prices per
  dimension (link, switch port and NIC, $ per GB/s, as `dse.explore.hwcost.HardwareCost` takes them).

Run: .venv/bin/python scripts/convert_libra.py [--libra ../shared/workloads/libra] [--out dse/data/libra]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.explore.libra.files import read_libra_cost_model, read_libra_network
from dse.training.libra_read import read_libra_workload
from dse.training.workload_formats import to_toml

ROOT = Path(__file__).resolve().parents[1]
ORIGIN = "LIBRA (github.com/astra-sim/libra, commit 0044db0, MIT licence)"
#: workload file -> communicator file per network
WORKLOADS = {
    "GPT_3": {"4d": "GPT_3_4d.yml", "3d": "GPT_3_3d.yml"},
    "MSFT_1T": {"4d": "MSFT_1T_4d.yml", "3d": "MSFT_1T_3d.yml"},
    "Turing_NLG": {"4d": "Turing_NLG_4D.yml", "3d": "Turing_NLG_3D.yml"},
    "ResNet_50": {"4d": "ResNet_50_4d.yml", "3d": "ResNet_50_3d.yml"},
}


def networks_toml(libra: Path) -> str:
    out = [f"# converted by scripts/convert_libra.py from {ORIGIN}: network/*.yml and cost_model/*.yml"]
    for net in ("4d", "3d"):
        network = read_libra_network(libra / "network" / f"{net}_network.yml")
        prices = read_libra_cost_model(libra / "cost_model" / f"{net}_cost_model.yml", network)
        out += ["", f"[{net}]"]
        out.append("kinds = [" + ", ".join(f'"{k}"' for k in network.kinds) + "]")
        out.append(f"npus = {list(network.npus)}")
        out.append("tiers = [" + ", ".join(f'"{t}"' for t in network.tiers) + "]")
        out.append(f"link = {list(prices.link)}")
        out.append(f"switch_port = {list(prices.switch_port)}")
        out.append(f"nic = {list(prices.nic)}")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default=str(ROOT.parent / "shared" / "workloads" / "libra"))
    ap.add_argument("--out", default=str(ROOT / "dse" / "data" / "libra"))
    a = ap.parse_args()
    libra, out = Path(a.libra), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "networks.toml").write_text(networks_toml(libra))
    for name, comms in WORKLOADS.items():
        for net, comm in comms.items():
            wl = read_libra_workload(libra / "workload" / f"{name}.txt", libra / "communicator" / comm)
            origin = f"converted by scripts/convert_libra.py from {ORIGIN}: workload/{name}.txt, communicator/{comm}"
            target = out / f"{name.lower()}_{net}.toml"
            target.write_text(to_toml(wl, origin=origin))
            print(target)


if __name__ == "__main__":
    main()
