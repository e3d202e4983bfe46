"""nlp.deploy: export to ONNX (int8), the onnxruntime backend for pipelines, and the model server.

    nlp serve runs/sentiment-reviews --port 8000        # nlp/deploy/server.py, docs/serving.md

Modules are imported on use (`from nlp.deploy.server import create_app`) so that importing the
package loads neither onnxruntime nor uvicorn.
"""
