"""``imbucket review``: one command over every regime, one memo (Markdown, HTML, JSON).

``budget`` plans the time budget across the regimes, ``run`` measures them with the bench's
own pieces (runner, memory, scale, contention, capacity), ``answers`` reads one line per
engine and regime from the results, ``memo`` renders the memo, ``command`` is the CLI.
"""
