"""The package version, in the core so that tracers and meters can name it without importing the
package's entry point (which picks a flowra adapter)."""

from typing import Final

VERSION: Final = "0.1.0"
