package validation

import (
	"math"
	"strconv"
	"time"
)

// This file is pydantic's lax datetime-from-str: speedate's
// DateTime::parse_bytes (RFC 3339 with relaxations, else a unix timestamp in
// seconds or milliseconds), and when that fails, Date::parse_bytes, whose
// error is the one reported (datetime_from_date_parsing). It follows the
// speedate that pydantic-core 2.46 ships, including its quirks (see
// intParse).

// sdErr is a speedate ParseError; its text is the error's documentation,
// which pydantic puts in the message.
type sdErr string

const (
	errNone          sdErr = ""
	errTooShort      sdErr = "input is too short"
	errExtraChars    sdErr = "unexpected extra characters at the end of the input"
	errDateTimeSep   sdErr = "invalid datetime separator, expected `T`, `t`, `_` or space"
	errDateSep       sdErr = "invalid date separator, expected `-`"
	errDateNotExact  sdErr = "Timestamp is not an exact date"
	errYearChar      sdErr = "invalid character in year"
	errMonthChar     sdErr = "invalid character in month"
	errDayChar       sdErr = "invalid character in day"
	errTimeSep       sdErr = "invalid time separator, expected `:`"
	errHourChar      sdErr = "invalid character in hour"
	errMinuteChar    sdErr = "invalid character in minute"
	errSecondChar    sdErr = "invalid character in second"
	errTzSign        sdErr = "invalid timezone sign"
	errTzHour        sdErr = "invalid timezone hour"
	errTzMinute      sdErr = "invalid timezone minute"
	errTzMinuteRange sdErr = "timezone minute value is outside expected range of 0-59"
	errTzRange       sdErr = "timezone offset must be less than 24 hours"
	errMonthRange    sdErr = "month value is outside expected range of 1-12"
	errDayRange      sdErr = "day value is outside expected range"
	errHourRange     sdErr = "hour value is outside expected range of 0-23"
	errMinuteRange   sdErr = "minute value is outside expected range of 0-59"
	errSecondRange   sdErr = "second value is outside expected range of 0-59"
	errFracMissing   sdErr = "second fraction digits missing after `.`"
	errDateTooSmall  sdErr = "dates before 0000 are not supported as unix timestamps"
	errDateTooLarge  sdErr = "dates after 9999 are not supported as unix timestamps"
	errTimeTooLarge  sdErr = "numeric times may not exceed 86,399 seconds"
)

const (
	msWatershed = 20_000_000_000  // above this a timestamp is in milliseconds
	unix9999    = 253_402_300_799 // 9999-12-31T23:59:59Z
	unix0000    = -62_167_219_200 // 0000-01-01T00:00:00Z
	yearZeroMsg = "year 0 is out of range"
)

type sdDateTime struct {
	year, month, day     int
	hour, minute, second int
	micro                int
	tz                   int // offset in seconds
	aware                bool
}

// instant is the datetime as a time in UTC; a naive datetime is taken as
// UTC.
func (dt sdDateTime) instant() time.Time {
	t := time.Date(dt.year, time.Month(dt.month), dt.day, dt.hour, dt.minute, dt.second, dt.micro*1000, time.UTC)
	if dt.aware {
		t = t.Add(-time.Duration(dt.tz) * time.Second)
	}
	return t
}

// parseDatetime validates s as pydantic's datetime field does in lax mode.
// On failure it returns the pydantic error type and the speedate message.
func parseDatetime(s string) (time.Time, string, string) {
	dt, err := parseSpeedateDateTime(s)
	if err != errNone {
		y, m, d, derr := parseSpeedateDate(s)
		if derr != errNone {
			return time.Time{}, typeDatetimeDate, string(derr)
		}
		dt = sdDateTime{year: y, month: m, day: d}
	}
	if dt.year == 0 {
		return time.Time{}, typeDatetime, yearZeroMsg
	}
	return dt.instant(), "", ""
}

func digitAt(s string, i int) (int, bool) {
	if i < len(s) && isDigit(s[i]) {
		return int(s[i] - '0'), true
	}
	return 0, false
}

// parseDatePartial is Date::parse_bytes_partial: YYYY-MM-DD at the start.
func parseDatePartial(s string) (y, m, d int, err sdErr) {
	if len(s) < 10 {
		return 0, 0, 0, errTooShort
	}
	for i := 0; i < 4; i++ {
		v, ok := digitAt(s, i)
		if !ok {
			return 0, 0, 0, errYearChar
		}
		y = y*10 + v
	}
	if s[4] != '-' {
		return 0, 0, 0, errDateSep
	}
	for i := 5; i < 7; i++ {
		v, ok := digitAt(s, i)
		if !ok {
			return 0, 0, 0, errMonthChar
		}
		m = m*10 + v
	}
	if s[7] != '-' {
		return 0, 0, 0, errDateSep
	}
	for i := 8; i < 10; i++ {
		v, ok := digitAt(s, i)
		if !ok {
			return 0, 0, 0, errDayChar
		}
		d = d*10 + v
	}
	var maxDay int
	switch m {
	case 1, 3, 5, 7, 8, 10, 12:
		maxDay = 31
	case 4, 6, 9, 11:
		maxDay = 30
	case 2:
		maxDay = 28
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			maxDay = 29
		}
	default:
		return 0, 0, 0, errMonthRange
	}
	if d < 1 || d > maxDay {
		return 0, 0, 0, errDayRange
	}
	return y, m, d, errNone
}

// parseSpeedateDate is Date::parse_bytes: an RFC 3339 date, or an integer
// timestamp that falls exactly on a midnight.
func parseSpeedateDate(s string) (y, m, d int, err sdErr) {
	y, m, d, err = parseDatePartial(s)
	if err == errNone && len(s) > 10 {
		err = errExtraChars
	}
	if err == errNone {
		return y, m, d, errNone
	}
	ts, ok := intParse(s)
	if !ok {
		return 0, 0, 0, err
	}
	sec, micro, terr := watershed(ts)
	if terr != errNone {
		return 0, 0, 0, terr
	}
	date, rem, terr := dateFromUnix(sec)
	if terr != errNone {
		return 0, 0, 0, terr
	}
	if rem != 0 || micro != 0 {
		return 0, 0, 0, errDateNotExact
	}
	return date.year, date.month, date.day, errNone
}

// parseSpeedateDateTime is DateTime::parse_bytes_with_config (microsecond
// overflow truncated, timestamps in UTC).
func parseSpeedateDateTime(s string) (sdDateTime, sdErr) {
	dt, err := parseRFC3339DateTime(s)
	if err == errNone {
		return dt, errNone
	}
	if v, ok := intParse(s); ok {
		return dateTimeFromUnix(v, 0)
	}
	if !intParseStopsAtDot(s) {
		return sdDateTime{}, err
	}
	f, ok := rustParseFloat(s)
	if !ok {
		return sdDateTime{}, err
	}
	norm := f
	if math.Abs(f) > msWatershed {
		norm = f / 1000
	}
	sec := saturatingI64(math.Floor(norm))
	micro := saturatingU32(math.Round((norm - float64(sec)) * 1e6))
	return dateTimeFromUnix(sec, micro)
}

func parseRFC3339DateTime(s string) (sdDateTime, sdErr) {
	y, m, d, err := parseDatePartial(s)
	if err != errNone {
		return sdDateTime{}, err
	}
	if len(s) <= 10 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ' && s[10] != '_') {
		return sdDateTime{}, errDateTimeSep
	}
	dt := sdDateTime{year: y, month: m, day: d}
	if err := parseTime(s, 11, &dt); err != errNone {
		return sdDateTime{}, err
	}
	return dt, errNone
}

// parseTime is Time::parse_bytes_offset: HH:MM[:SS[.f+]] then Z or ±HH[:]MM.
func parseTime(s string, off int, dt *sdDateTime) sdErr {
	if len(s)-off < 5 {
		return errTooShort
	}
	h1, ok1 := digitAt(s, off)
	h2, ok2 := digitAt(s, off+1)
	if !ok1 || !ok2 {
		return errHourChar
	}
	if s[off+2] != ':' {
		return errTimeSep
	}
	m1, ok1 := digitAt(s, off+3)
	m2, ok2 := digitAt(s, off+4)
	if !ok1 || !ok2 {
		return errMinuteChar
	}
	dt.hour, dt.minute = h1*10+h2, m1*10+m2
	if dt.hour > 23 {
		return errHourRange
	}
	if dt.minute > 59 {
		return errMinuteRange
	}
	length := 5
	if off+5 < len(s) && s[off+5] == ':' {
		s1, ok1 := digitAt(s, off+6)
		if !ok1 {
			return errSecondChar
		}
		s2, ok2 := digitAt(s, off+7)
		if !ok2 {
			return errSecondChar
		}
		dt.second = s1*10 + s2
		if dt.second > 59 {
			return errSecondRange
		}
		length = 8
		if off+8 < len(s) && (s[off+8] == '.' || s[off+8] == ',') {
			length = 9
			i := 0
			micro := 0
			for off+length+i < len(s) && isDigit(s[off+length+i]) {
				if i < 6 {
					micro = micro*10 + int(s[off+length+i]-'0')
				}
				i++
			}
			if i == 0 {
				return errFracMissing
			}
			for j := i; j < 6; j++ {
				micro *= 10
			}
			dt.micro = micro
			length += i
		}
	}
	pos := off + length
	if pos < len(s) {
		c := s[pos]
		pos++
		if c == 'Z' || c == 'z' {
			dt.aware, dt.tz = true, 0
		} else {
			sign := 1
			switch c {
			case '+':
			case '-':
				sign = -1
			case 0xE2: // U+2212 MINUS SIGN, allowed by ISO 8601
				if pos+1 >= len(s) || s[pos] != 0x88 || s[pos+1] != 0x92 {
					return errTzSign
				}
				pos += 2
				sign = -1
			default:
				return errTzSign
			}
			h1, ok1 := digitAt(s, pos)
			h2, ok2 := digitAt(s, pos+1)
			if !ok1 || !ok2 {
				return errTzHour
			}
			var m1 int
			switch {
			case pos+2 < len(s) && s[pos+2] == ':':
				pos += 3
				v, ok := digitAt(s, pos)
				if !ok {
					return errTzMinute
				}
				m1 = v
			case pos+2 < len(s) && isDigit(s[pos+2]):
				m1 = int(s[pos+2] - '0')
				pos += 2
			default:
				return errTzMinute
			}
			m2, ok := digitAt(s, pos+1)
			if !ok {
				return errTzMinute
			}
			minuteSeconds := m1*600 + m2*60
			if minuteSeconds >= 3600 {
				return errTzMinuteRange
			}
			offset := sign * (h1*36000 + h2*3600 + minuteSeconds)
			if offset >= 24*3600 || offset <= -24*3600 {
				return errTzRange
			}
			dt.aware, dt.tz = true, offset
			pos += 2
		}
	}
	if len(s) > pos {
		return errExtraChars
	}
	return errNone
}

// intParse is speedate's int_parse_bytes as pydantic-core 2.46 ships it:
// an optional sign and ASCII digits, accumulated with wrapping arithmetic
// and rejected only when the running value turns negative, so some inputs
// past int64 wrap around to small positive values.
func intParse(s string) (int64, bool) {
	v, _, ok := intParseInternal(s)
	return v, ok
}

// intParseInternal returns the value, or the byte that stopped it (-1 for
// an empty input).
func intParseInternal(s string) (int64, int, bool) {
	if s == "" {
		return 0, -1, false
	}
	neg := false
	i := 0
	if len(s) >= 2 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		i = 1
	}
	if !isDigit(s[i]) {
		return 0, int(s[i]), false
	}
	v := int64(s[i] - '0')
	for _, c := range []byte(s[i+1:]) {
		if !isDigit(c) {
			return 0, int(c), false
		}
		v = v*10 + int64(c-'0')
		if v < 0 {
			return 0, int(c), false
		}
	}
	if neg {
		v = -v
	}
	return v, 0, true
}

// intParseStopsAtDot: float_parse_bytes only tries a float when the
// integer parse stopped at a '.'.
func intParseStopsAtDot(s string) bool {
	_, stop, ok := intParseInternal(s)
	return !ok && stop == '.'
}

// rustParseFloat is Rust's f64::from_str for the decimal forms that can
// reach it here: [+-] digits [. digits] [e [+-] digits], at least one digit
// before the exponent.
func rustParseFloat(s string) (float64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	mant := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		mant++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			mant++
		}
	}
	if mant == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			exp++
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	// The grammar is checked above; the only error left is overflow, which
	// Rust also turns into an infinity.
	f, _ := strconv.ParseFloat(s, 64)
	return f, true
}

// saturatingI64 is Rust's `f as i64`.
func saturatingI64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 9223372036854775807:
		return math.MaxInt64
	case f <= -9223372036854775808:
		return math.MinInt64
	}
	return int64(f)
}

// saturatingU32 is Rust's `f as u32`.
func saturatingU32(f float64) uint32 {
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(f)
}

// watershed is speedate's timestamp_watershed: values above 2e10 in
// magnitude are milliseconds.
func watershed(ts int64) (int64, uint32, sdErr) {
	if ts == math.MinInt64 {
		return 0, 0, errDateTooSmall
	}
	abs := ts
	if abs < 0 {
		abs = -abs
	}
	if abs <= msWatershed {
		return ts, 0, errNone
	}
	sec := ts / 1000
	micro := (ts % 1000) * 1000
	if micro < 0 {
		sec--
		micro += 1_000_000
	}
	return sec, uint32(micro), errNone
}

type sdDate struct{ year, month, day int }

// dateFromUnix is Date::from_timestamp_calc: the date and the seconds into
// that day.
func dateFromUnix(sec int64) (sdDate, int64, sdErr) {
	if sec < unix0000 {
		return sdDate{}, 0, errDateTooSmall
	}
	if sec > unix9999 {
		return sdDate{}, 0, errDateTooLarge
	}
	t := time.Unix(sec, 0).UTC()
	rem := sec % 86400
	if rem < 0 {
		rem += 86400
	}
	return sdDate{year: t.Year(), month: int(t.Month()), day: t.Day()}, rem, errNone
}

// dateTimeFromUnix is DateTime::from_timestamp_with_config with a UTC
// offset of 0.
func dateTimeFromUnix(ts int64, micro uint32) (sdDateTime, sdErr) {
	sec, extra, err := watershed(ts)
	if err != errNone {
		return sdDateTime{}, err
	}
	total := uint64(micro) + uint64(extra)
	if total > math.MaxUint32 {
		return sdDateTime{}, errTimeTooLarge
	}
	if total >= 1_000_000 {
		add := int64(total / 1_000_000)
		if sec > math.MaxInt64-add {
			return sdDateTime{}, errTimeTooLarge
		}
		sec += add
		total %= 1_000_000
	}
	date, rem, err := dateFromUnix(sec)
	if err != errNone {
		return sdDateTime{}, err
	}
	return sdDateTime{
		year: date.year, month: date.month, day: date.day,
		hour: int(rem / 3600), minute: int(rem % 3600 / 60), second: int(rem % 60),
		micro: int(total), aware: true,
	}, errNone
}
