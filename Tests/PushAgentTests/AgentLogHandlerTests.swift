import Logging
@testable import PushAgent
@testable import PushAcrobits
import PushBackend
import PushConfig
import Synchronization
import Testing
import PushTestThreads

/// Log lines as journald, a terminal and a collector read them.
@Suite(.blockingThreads) struct AgentLogHandlerTests {
    final class Captured: Sendable {
        let text = Mutex("")
        var value: String { text.withLock { $0 } }
    }

    static func logger(_ output: LogOutput) -> Logger {
        Logger(label: "test") { _ in AgentLogHandler(output: output, level: .debug) }
    }

    @Test func textLinesAreTimestamped() {
        let captured = Captured()
        let output = LogOutput(format: .text, environment: [:], isTerminal: false) { s in captured.text.withLock { $0 += s } }
        Self.logger(output).warning("johndow: failed", metadata: ["attempt": "2"])
        let line = captured.value
        #expect(line.hasSuffix(" warning: johndow: failed attempt=2\n"))
        #expect(line.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z warning: .*\n/) != nil)
    }

    @Test func underJournaldLinesCarryPrioritiesAndNoTimestamps() {
        let captured = Captured()
        let output = LogOutput(format: .text, environment: ["JOURNAL_STREAM": "8:1234"], isTerminal: true) { s in
            captured.text.withLock { $0 += s }
        }
        let logger = Self.logger(output)
        logger.error("e")
        logger.warning("w")
        logger.notice("n")
        logger.info("i")
        logger.debug("d")
        #expect(captured.value == "<3>e\n<4>w\n<5>n\n<6>i\n<7>d\n")
        #expect(!output.isTerminal)
    }

    @Test func jsonLinesAreObjects() {
        let captured = Captured()
        let output = LogOutput(format: .json, environment: [:], isTerminal: false) { s in captured.text.withLock { $0 += s } }
        Self.logger(output).info("say \"hi\"\n", metadata: ["account": "johndow"])
        let line = captured.value
        #expect(line.hasPrefix("{\"time\":\""))
        #expect(line.hasSuffix("\"level\":\"info\",\"message\":\"say \\\"hi\\\"\\n\",\"account\":\"johndow\"}\n"))
    }

    @Test func logLinesGoAboveTheProgressLine() {
        let captured = Captured()
        let output = LogOutput(format: .text, environment: [:], isTerminal: true) { s in captured.text.withLock { $0 += s } }
        output.progress("1/2 delivered")
        output.line("a log line")
        output.clearProgress()
        #expect(captured.value == "\r\u{1B}[K1/2 delivered\r\u{1B}[Ka log line\n1/2 delivered\r\u{1B}[K")
    }
}
