/// HTTP-date parsing (RFC 9110 §5.6.7) and the proleptic Gregorian arithmetic behind it, without Foundation.
enum HTTPDate {
    static let shortDayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    static let longDayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The Unix time of an HTTP-date in any of its three forms, or nil.
    static func parse(_ bytes: ArraySlice<UInt8>, nowEpochSeconds: Int64?) -> Int64? {
        imfFixdate(bytes) ?? rfc850Date(bytes, nowEpochSeconds: nowEpochSeconds) ?? asctimeDate(bytes)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    static func imfFixdate(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var cursor = ByteCursor(bytes)
        guard cursor.name(in: shortDayNames) != nil, cursor.take(","), cursor.take(" "),
              let day = cursor.digits(2), cursor.take(" "),
              let month = cursor.name(in: monthNames), cursor.take(" "),
              let year = cursor.digits(4), cursor.take(" "),
              let time = cursor.timeOfDay(), cursor.take(" "), cursor.take("GMT"), cursor.isAtEnd
        else { return nil }
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    static func rfc850Date(_ bytes: ArraySlice<UInt8>, nowEpochSeconds: Int64?) -> Int64? {
        var cursor = ByteCursor(bytes)
        guard cursor.name(in: longDayNames) != nil, cursor.take(","), cursor.take(" "),
              let day = cursor.digits(2), cursor.take("-"),
              let month = cursor.name(in: monthNames), cursor.take("-"),
              let twoDigitYear = cursor.digits(2), cursor.take(" "),
              let time = cursor.timeOfDay(), cursor.take(" "), cursor.take("GMT"), cursor.isAtEnd
        else { return nil }
        let year = fullYear(twoDigitYear, nowEpochSeconds: nowEpochSeconds)
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994` (day of month as two digits, or a space and one digit)
    static func asctimeDate(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var cursor = ByteCursor(bytes)
        guard cursor.name(in: shortDayNames) != nil, cursor.take(" "),
              let month = cursor.name(in: monthNames), cursor.take(" ")
        else { return nil }
        let day = cursor.take(" ") ? cursor.digits(1) : cursor.digits(2)
        guard let day, cursor.take(" "),
              let time = cursor.timeOfDay(), cursor.take(" "),
              let year = cursor.digits(4), cursor.isAtEnd
        else { return nil }
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// The four-digit year of an RFC 850 two-digit year: within 50 years of now (RFC 9110 §5.6.7).
    static func fullYear(_ twoDigits: Int, nowEpochSeconds: Int64?) -> Int {
        guard let nowEpochSeconds else { return twoDigits < 70 ? 2000 + twoDigits : 1900 + twoDigits }
        let days = nowEpochSeconds >= 0 ? nowEpochSeconds / 86_400 : (nowEpochSeconds + 1) / 86_400 - 1
        let currentYear = Int(civilYear(daysSinceEpoch: days))
        var year = currentYear - currentYear % 100 + twoDigits
        if year > currentYear + 50 { year -= 100 } else if year <= currentYear - 50 { year += 100 }
        return year
    }

    /// Unix time of a validated civil date and time in GMT; nil when the date does not exist.
    static func epochSeconds(year: Int, month: Int, day: Int, time: (hour: Int, minute: Int, second: Int)) -> Int64? {
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              time.hour <= 23, time.minute <= 59, time.second <= 60
        else { return nil }
        let days = daysFromCivil(year: Int64(year), month: Int64(month), day: Int64(day))
        return days * 86_400 + Int64(time.hour * 3600 + time.minute * 60 + time.second)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The year of the day `days` after 1970-01-01 (the year part of Hinnant's `civil_from_days`).
    static func civilYear(daysSinceEpoch days: Int64) -> Int64 {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }
}
