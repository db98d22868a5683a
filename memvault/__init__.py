"""memvault: long-term memory for LLM work in a git-versioned folder of markdown files."""

import os as _os

__version__ = "0.1.0"

# onnxruntime (under fastembed) and huggingface_hub phone home unless told not to;
# memvault makes no network call the user did not configure. Explicit user values win.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
_os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
_os.environ.setdefault("DO_NOT_TRACK", "1")
