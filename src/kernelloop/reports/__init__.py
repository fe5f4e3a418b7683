"""Self-contained HTML reports: figures drawn to inline SVG (figures.py) in a page that needs no
network to open (page.py). `runs/report.py` and `bench/html_report.py` compose them."""
