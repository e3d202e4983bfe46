"""Chinese spelling correction (CSC): one character in, one character out, at every position.

The model is an encoder with two heads, as MacBERT4CSC and ERNIE-CSC put them: a detection head
(is this character wrong?) and a correction head over the vocabulary, initialised from the
backbone's masked-LM head (`heads.py`). Training data is made offline from clean sentences with
confusion sets of similar sound and shape (`synthetic.py`, `resources.py`); the held-out benchmark
is SIGHAN-15 as pycorrector ships it (`data.py`), scored at sentence and character level
(`metrics.py`).

    fix = nlp.pipeline("text-correction", model="runs/correction/best")
    fix("我跟我朋唷打算去法国玩儿。")
    # {"source": ..., "target": "我跟我朋友打算去法国玩儿。",
    #  "errors": [{"position": 4, "correction": {"唷": "友"}, "start": 4, "end": 5, "score": 0.93}]}
"""
