// Object-graph comparison: owned by the compare-objectgraph work.
