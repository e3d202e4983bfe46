"""nlp.deploy: export to ONNX (fp32, int8), the onnxruntime backend for pipelines, the server
(nlp/deploy/server.py, `nlp serve`, docs/serving.md: imported on use, so importing this package
loads no uvicorn).

    from nlp.deploy import export_model, OnnxBackend
    export_model("runs/ner", "export/ner", quantize="int8")
    nlp.pipeline(model="export/ner", task=...)  # runs on onnxruntime (nlp/auto.py detects the manifest)

Layer: imports nlp.tasks, nlp.models, nlp.tokenizer; only nlp.auto and the CLI import it;
it never imports the trainer (serving does not load it).
"""

from nlp.deploy.backend import OnnxBackend
from nlp.deploy.export import ExportError, ExportResult, export_model
from nlp.deploy.manifest import MANIFEST_NAME, is_export_dir, read_manifest, verify_files

__all__ = [
    "export_model",
    "ExportResult",
    "ExportError",
    "OnnxBackend",
    "is_export_dir",
    "read_manifest",
    "verify_files",
    "MANIFEST_NAME",
]
