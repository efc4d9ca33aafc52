package queue

// Validate reports what New would refuse in the lane, after filling in its
// defaults: a bad table name, a negative size, a retry policy out of range.
func (l Lane) Validate() error {
	_, err := l.withDefaults()
	return err
}

// Validate reports what NewWorker would refuse in the options, after
// filling in their defaults.
func (o WorkerOptions) Validate() error {
	return o.setDefaults()
}
