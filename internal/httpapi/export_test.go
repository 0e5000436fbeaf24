package httpapi

// SetHandWrittenJSON switches the hand-written encoders on or off.
func SetHandWrittenJSON(on bool) { handWritten = on }
