package decode

import (
	"encoding/binary"
	"fmt"
)

// FrameHeaderLen is the length of the Confluent wire-format header: magic byte 0 followed
// by the schema id as a 4-byte big-endian integer.
const FrameHeaderLen = 5

// ParseFrame splits a Confluent-framed Kafka value into its schema id and Avro binary
// payload. The payload aliases value (no copy) and may be empty (a record whose fields
// all encode to zero bytes).
//
// Errors are *Error with reason ReasonTooShort for values of 0..4 bytes (an empty value
// included; a nil value is a tombstone and should be handled before calling) and
// ReasonBadMagic when the first byte is not 0. The id is returned as read, as an unsigned
// 32-bit number; ids the registry does not know (0 included) are the registry's concern.
func ParseFrame(value []byte) (schemaID int, payload []byte, err error) {
	if len(value) < FrameHeaderLen {
		return 0, nil, newError(ReasonTooShort, "", fmt.Errorf("parse frame: value has %d bytes, a Confluent frame needs at least %d", len(value), FrameHeaderLen))
	}
	if value[0] != 0 {
		return 0, nil, newError(ReasonBadMagic, "", fmt.Errorf("parse frame: magic byte is 0x%02x, want 0x00", value[0]))
	}
	return int(binary.BigEndian.Uint32(value[1:5])), value[FrameHeaderLen:], nil
}
