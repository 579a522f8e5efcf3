"""Bokeh views: analysis tables in, bokeh models (and their ColumnDataSources) out.

No ipywidgets or IPython here; :mod:`aonkit.widgets` wraps these models for notebooks.
Importing a view module imports bokeh; ``import aonkit`` does not.
"""
