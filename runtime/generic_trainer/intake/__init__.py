"""What a verb is asked to do: every input declared once (`options.py` and its tables), parsed from
CLI flags or KFP executor input into one typed request, and the outputs checked before TensorFlow
loads.
"""
