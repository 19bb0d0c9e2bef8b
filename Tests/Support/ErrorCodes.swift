import NetplayService
import NetplayWire

/// The error code a throwing call produced (nil when it did not throw; INTERNAL for an error
/// that is not a ``ServiceError``).
public func code(_ body: () throws -> Any) -> ErrorCode? {
    do {
        _ = try body()
        return nil
    } catch let error as ServiceError {
        return error.code
    } catch {
        return .internal
    }
}
