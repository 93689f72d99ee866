@testable import PushAgent
import PushConfig
import Testing
import PushTestThreads

/// Which `agent:` settings a reload applies, and which it names as waiting for a restart.
@Suite(.blockingThreads) struct AgentSettingsReloadTests {
    @Test func aReloadNamesTheSettingsThatWaitForARestart() {
        let old = AgentSettings()
        var new = old
        new.reportInterval = .seconds(3_600)
        new.timeout = .seconds(5)
        new.stateDirectory = "/elsewhere"
        #expect(old.waitingForRestart(new) == [], "a reload applies these (the state directory is never changed while running)")
        new.listen = ListenAddress("127.0.0.1:9100")
        new.concurrency = 4
        new.retry.max = .seconds(60)
        #expect(old.waitingForRestart(new) == ["agent.concurrency", "agent.retry", "agent.listen"])
    }
}
