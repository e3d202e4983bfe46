"""nlp.tasks"""
