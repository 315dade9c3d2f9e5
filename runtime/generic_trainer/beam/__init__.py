"""What import-examples and transform build on: Beam pipeline options and runs, CSV/tabular parsing.
"""
