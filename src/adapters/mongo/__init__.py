"""MongoDB adapters: OpenIM's bucket collection, the document-per-message layout, seqs.

Every filter, update and pipeline is built in ``commands`` and every reply is read in
``replies`` (both pure); the other modules make one driver call per primitive.
"""
