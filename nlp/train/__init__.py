"""nlp.train"""
