import PushAdobe
import Testing
import PushTestThreads

/// The actions of each event (seed 001): what the Adobe SDK sends, in its order.
@Suite(.blockingThreads) struct TrackingEventTests {
    @Test func eachEventSendsTheSDKsActions() {
        #expect(TrackingEvent.impression.actions.map(\.rawValue) == ["7"])
        #expect(TrackingEvent.click.actions.map(\.rawValue) == ["2"])
        #expect(TrackingEvent.open.actions.map(\.rawValue) == ["2", "1"])
        #expect(TrackingEvent.dismiss.actions.map(\.rawValue) == ["2"])
    }
}
