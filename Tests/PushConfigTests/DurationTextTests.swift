import PushConfig
import Testing
import PushTestThreads

@Suite(.blockingThreads) struct DurationTextTests {
    @Test(arguments: [
        (Duration.milliseconds(0), "0ms"), (.milliseconds(250), "250ms"), (.milliseconds(4237), "4.2s"),
        (.seconds(20), "20s"), (.milliseconds(59_990), "60s"), (.seconds(60), "1m"), (.seconds(200), "3m 20s"),
        (.seconds(1800), "30m"), (.seconds(3600), "1h"), (.seconds(3900), "1h 5m"),
    ])
    func text(_ duration: Duration, _ expected: String) {
        #expect(DurationText(duration).description == expected)
    }
}
