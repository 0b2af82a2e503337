@_exported import ObjectGraph
@_exported import StrataEngine
