"""The progress line of an emulated launch (`ptxgen run --backend emu`): CTAs done of the grid
and the seconds spent, redrawn in place on stderr about once a second while the launch runs and
erased when it ends. Nothing is drawn when stderr is not a terminal, with --quiet, or for a
launch that ends within the first second."""
import sys
import threading
import time


class CtaProgress:
    """A `progress(kernel, ctas_done, ctas)` callback for emulate(); use it as a context
    manager (the redrawing thread stops at exit)."""

    def __init__(self, enabled=True, file=None, every=1.0):
        self.file = file or sys.stderr
        self.enabled = enabled and hasattr(self.file, "isatty") and self.file.isatty()
        self.every = every
        self._state = None                  # (kernel, done, total, start) of the running launch
        self._width = 0                     # characters of the line on screen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __call__(self, kernel, done, total):
        if not self.enabled:
            return
        with self._lock:
            if self._state is None or self._state[0] != kernel or done == 0:
                self._state = (kernel, done, total, time.perf_counter())
            else:
                self._state = (kernel, done, total, self._state[3])
            if done >= total:
                self._state = None
                self._erase()
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def _tick(self):
        while not self._stop.wait(self.every):
            with self._lock:
                if self._state is None:
                    continue
                kernel, done, total, start = self._state
                if time.perf_counter() - start < self.every:
                    continue
                line = (f"emulating {kernel}: {done}/{total} CTAs done, "
                        f"{time.perf_counter() - start:.0f} s")
                self.file.write("\r" + line.ljust(self._width))
                self.file.flush()
                self._width = len(line)

    def _erase(self):
        if self._width:
            self.file.write("\r" + " " * self._width + "\r")
            self.file.flush()
            self._width = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._erase()
