"""The test matrix. `uv run nox` runs the default sessions (what CI runs); `uv run nox -l` lists them all.

Sessions run inside the uv workspace environment (`uv sync` installs everything), so they start instantly;
each sets DEV for one device/renderer. The core suite is the same for every DEV.
"""
import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "typecheck", "python", "clang", "llvm", "null", "backend_cpu"]

CORE_TESTS = "packages/core/tests"


def _pytest(session: nox.Session, *args: str, dev: str) -> None:
  session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, *session.posargs, env={"DEV": dev})


@nox.session
def lint(session: nox.Session) -> None:
  """ruff over everything."""
  session.run("ruff", "check", "packages", "examples", "bench", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
  """mypy over core."""
  session.run("mypy", "packages/core/src/tinygrad")


@nox.session
def python(session: nox.Session) -> None:
  """The core suite on the PYTHON device (the UOp interpreter: the definition of every op)."""
  _pytest(session, CORE_TESTS, dev="PYTHON")


@nox.session
def clang(session: nox.Session) -> None:
  """The core suite on CPU with C compiled by clang."""
  _pytest(session, CORE_TESTS, dev="CPU:CLANG")


@nox.session
def llvm(session: nox.Session) -> None:
  """The core suite on CPU with LLVM IR compiled by llvmlite."""
  _pytest(session, CORE_TESTS, dev="CPU:LLVM")


@nox.session
def null(session: nox.Session) -> None:
  """Compile-only: the suite's tensor programs compiled by every CPU renderer on the NULL device (nothing runs)."""
  for renderer in ("LLVM", "CLANG"):
    _pytest(session, CORE_TESTS, "-m", "compile_only", dev=f"NULL:{renderer}")


@nox.session
def backend_cpu(session: nox.Session) -> None:
  """backend-cpu's own tests (renderers, runtime) and the out-of-tree plugin example."""
  _pytest(session, "packages/backend-cpu/tests", "examples/plugin-example/tests", dev="CPU")
