"""nlp.models"""
