"""Every library kernel's emitted PTX, pinned by hash (tests/ptx_pins.py lists the kernels):
a restructuring that changes no behaviour changes no byte. A deliberate change to a kernel
rewrites the pins with `python tests/ptx_pins.py` and says why in its commit."""
import json

import ptx_pins


def test_every_library_kernel_emits_its_pinned_ptx():
    pinned = json.loads(ptx_pins.PINS.read_text())
    now = ptx_pins.current()
    assert set(now) >= set(pinned), f"kernels no longer built: {sorted(set(pinned) - set(now))}"
    changed = sorted(k for k in pinned if now[k] != pinned[k])
    assert not changed, f"emitted PTX changed for {len(changed)} kernels: {changed[:8]}"
