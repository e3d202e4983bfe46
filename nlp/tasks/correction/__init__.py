"""Chinese spelling correction (CSC): one character in, one character out, at every position.

The model is an encoder with two heads, as MacBERT4CSC and ERNIE-CSC put them: a detection head
(is this character wrong?) and a correction head over the vocabulary, initialised from the
backbone's masked-LM head (`heads.py`). Training data is made offline from clean sentences with
confusion sets of similar sound and shape (`synthetic.py`, `resources.py`); the held-out benchmark
is SIGHAN-15 as pycorrector ships it (`data.py`), scored at sentence and character level
(`metrics.py`).

    fix = nlp.pipeline("text-correction", model="runs/correction-csc/model")
    fix("他再也不会这扬。")
    # {"source": "他再也不会这扬。", "target": "他再也不会这样。",
    #  "errors": [{"position": 6, "correction": {"扬": "样"}, "start": 6, "end": 7, "score": 0.68}]}
"""
