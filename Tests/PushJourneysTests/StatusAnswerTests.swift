@testable import PushJourneys
import PushBackend
import PushScheduler
import Testing
import PushTestThreads

/// SPEC §9.2: what each status answer of the Journeys status endpoint means.
@Suite(.blockingThreads) struct StatusAnswerTests {
    static func outcome(_ status: String?, _ reason: String? = nil) -> Outcome? {
        JourneysPoller.outcome(.init(Status: status, FailureReason: reason))
    }

    @Test func successAndDuplicatesAreDelivered() {
        #expect(Self.outcome("Success") == .delivered)
        #expect(Self.outcome("Failed", " DuplicateExists ") == .delivered)
    }

    @Test func pendingIsAskedAgain() {
        #expect(Self.outcome("Pending") == nil)
        #expect(Self.outcome(" Pending ", " ") == nil)
        #expect(Self.outcome(nil) == nil)
    }

    @Test func eachFailureReasonIsMapped() {
        guard case .retry(let failure)? = Self.outcome("Failed", " FailedToStoreDevice ") else {
            Issue.record("FailedToStoreDevice is registered again")
            return
        }
        #expect(failure.reason.contains("FailedToStoreDevice"))
        #expect(Self.outcome("Failed", "DeviceTokenTooLong") == .rejected("Journeys: the device token is too long (DeviceTokenTooLong)"))
        #expect(Self.outcome("Failed", " DryRunSendingFailed") == .rejected("Journeys could not send a test notification to the device (DryRunSendingFailed)"))
        #expect(Self.outcome("Failed", "ApiTokenNotValid ") == .stopped("Journeys: the API token is not valid (ApiTokenNotValid)"))
        #expect(Self.outcome("Failed", " SomethingNew ") == .rejected("Journeys failed the registration: 'SomethingNew'"))
        #expect(Self.outcome("Failed", nil) == .rejected("Journeys failed the registration: 'no reason given'"))
        #expect(Self.outcome("Exploded") == .rejected("Journeys answered the status 'Exploded'"))
    }

    @Test func registrationIdsAreReadFromOneObjectOrAnArray() {
        #expect(JourneysSender.registrationIDs(Array(#"{"RegistrationRequestId":"r1"}"#.utf8), single: true) == ["r1"])
        #expect(JourneysSender.registrationIDs(Array(#"[{"RegistrationRequestId":"r1"},{"RegistrationRequestId":"r2"}]"#.utf8),
                                                 single: false) == ["r1", "r2"])
        #expect(JourneysSender.registrationIDs(Array("".utf8), single: true) == nil)
        #expect(JourneysSender.registrationIDs(Array(#"{"Other":"x"}"#.utf8), single: true) == nil)
    }
}
