"""The board around a GPU: its PCIe link (generation and width against the maximum), the energy it has used
since the driver loaded, and its PCI bus id (which names it in the kernel log's Xid lines).

A link that trained at a lower generation or width than the slot allows (a riser, a dirty contact, a BIOS
setting) slows every host-to-GPU copy; it shows as e.g. 'PCIe gen 3/5 x8/16'. An idle GPU may lower its link
generation to save power: the current generation is worth reading under load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yolotui.telemetry import sanity

Query = Callable[..., Any]


def read_board(reading: Any, query: Query, nvml: Any, handle: Any) -> None:
    """Fill `reading`'s pcie_* fields, energy_j and pci_bus_id (None where unsupported or implausible)."""
    for attribute, name, bounds in (
            ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", sanity.PCIE_GEN),
            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", sanity.PCIE_GEN),
            ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", sanity.PCIE_WIDTH),
            ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", sanity.PCIE_WIDTH)):
        func = getattr(nvml, name, None)
        setattr(reading, attribute, sanity.whole(query(func, handle), bounds) if func is not None else None)
    energy = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
    millijoules = sanity.number(query(energy, handle), sanity.ENERGY_MJ) if energy is not None else None
    reading.energy_j = millijoules / 1000.0 if millijoules is not None else None
    pci = getattr(nvml, "nvmlDeviceGetPciInfo", None)
    info = query(pci, handle) if pci is not None else None
    bus_id = getattr(info, "busId", None)
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", "replace")
    reading.pci_bus_id = bus_id.strip().lower()[:32] if isinstance(bus_id, str) and bus_id.strip() else None


def pcie_text(reading: Any) -> str:
    """'PCIe gen 4/4 x16/16' (with '!' after a part below its maximum); '' when unknown."""
    gen, gen_max = getattr(reading, "pcie_gen", None), getattr(reading, "pcie_gen_max", None)
    width, width_max = getattr(reading, "pcie_width", None), getattr(reading, "pcie_width_max", None)
    parts = []
    if gen is not None:
        parts.append(f"gen {gen}" + (f"/{gen_max}" if gen_max else "") + ("!" if gen_max and gen < gen_max else ""))
    if width is not None:
        parts.append(f"x{width}" + (f"/{width_max}" if width_max else "")
                     + ("!" if width_max and width < width_max else ""))
    return ("PCIe " + " ".join(parts)) if parts else ""


def link_degraded(reading: Any) -> bool:
    """True when the link's width is below its maximum (generation drops at idle are normal, width drops are not)."""
    width, width_max = getattr(reading, "pcie_width", None), getattr(reading, "pcie_width_max", None)
    return bool(width and width_max and width < width_max)


def bus_key(bus_id: str | None) -> str | None:
    """A PCI bus id reduced to 'domain:bus:device' in lower case with the domain as 4 digits, so NVML's
    '00000000:3B:00.0' and the kernel's 'PCI:0000:3b:00' compare equal."""
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    parts = text.split(":")
    if len(parts) < 3:
        return None
    domain, bus, device = parts[0][-4:].rjust(4, "0"), parts[1], parts[2].split(".")[0]
    return f"{domain}:{bus}:{device}"
