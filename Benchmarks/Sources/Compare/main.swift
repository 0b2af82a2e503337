print("compare: not yet implemented")
