/// ObjectGraph: Core Data's persistence contract for Linux (model, object IDs, managed objects,
/// context, coordinator, stores). Filled in by the ObjectGraph issue.
public enum ObjectGraphModule {}
