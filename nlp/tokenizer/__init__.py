"""nlp.tokenizer"""
