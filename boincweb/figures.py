"""Plotly figures as the pages embed them: JSON in a <script> element that static/js/charts.js
draws into the <div data-figure> naming its id."""

from django.utils.html import json_script
from plotly.utils import PlotlyJSONEncoder


def figure_script(value, element_id):
    """``value`` (a figure, or plain data holding figures) as ``<script id="element_id"
    type="application/json">``: Django's json_script, so no text in a figure can close the
    element, with Plotly's encoder, so figures, NaN and dates come out as plotly.js reads them."""
    return json_script(value, element_id, encoder=PlotlyJSONEncoder)
