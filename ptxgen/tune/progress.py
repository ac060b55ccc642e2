"""A progress bar on a terminal: tqdm when it is installed, else one redrawn line. When the
output is not a terminal (a log file), one summary line per stage instead."""
import sys
import time


class Progress:
    def __init__(self, total, desc, enabled=True, file=None):
        self.total, self.desc, self.n = total, desc, 0
        self.file = file or sys.stderr
        self.enabled = enabled and total > 0
        self._bar, self._t0, self._shown = None, time.perf_counter(), -1
        if not self.enabled or not self._tty():
            return                        # redrawn bars would flood a log with lines
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=desc, file=self.file, leave=True,
                         dynamic_ncols=True, mininterval=0.5)

    def update(self, n=1, note=None):
        self.n += n
        if not self.enabled:
            return
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
        elif self._tty():
            pct = int(100 * self.n / self.total)
            if pct != self._shown:
                self._shown = pct
                fill = pct * 30 // 100
                self.file.write(f"\r{self.desc} [{'#' * fill}{'.' * (30 - fill)}] "
                                f"{self.n}/{self.total}")
                self.file.flush()

    def close(self):
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            return
        secs = time.perf_counter() - self._t0
        lead = "\r" if self._tty() else ""
        self.file.write(f"{lead}{self.desc}: {self.n}/{self.total} in {secs:.1f} s"
                        f"{' ' * 20}\n")
        self.file.flush()

    def _tty(self):
        return hasattr(self.file, "isatty") and self.file.isatty()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
