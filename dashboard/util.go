package dashboard

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
