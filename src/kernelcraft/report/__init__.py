"""Reports: what a result, a run or a bench found. data.py gathers it from the store into plain dicts;
terminal.py renders them as rich tables, page.py (html.py's and apply_html.py's pages) as one self-contained page with plots.py's SVG plots;
metrics.py holds the numbers benchmarks are judged by (fast_p, geomean)."""
