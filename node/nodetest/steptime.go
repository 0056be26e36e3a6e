package nodetest

import (
	"sync"
	"time"
)

// StepTime is a commands.TimeSource a test steps: Pass moves both clocks
// as real time does, Step moves only the wall clock (an operator, NTP, a
// virtual machine's host).
type StepTime struct {
	mu   sync.Mutex
	wall time.Time
	el   time.Duration
}

// NewStepTime starts both clocks at wall.
func NewStepTime(wall time.Time) *StepTime { return &StepTime{wall: wall} }

// Wall returns the wall clock.
func (s *StepTime) Wall() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.wall }

// Elapsed returns the elapsed-time clock.
func (s *StepTime) Elapsed() time.Duration { s.mu.Lock(); defer s.mu.Unlock(); return s.el }

// Pass lets d of real time pass.
func (s *StepTime) Pass(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall, s.el = s.wall.Add(d), s.el+d
}

// Step steps the wall clock by d.
func (s *StepTime) Step(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall = s.wall.Add(d)
}
