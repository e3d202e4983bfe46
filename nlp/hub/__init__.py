"""nlp.hub"""
