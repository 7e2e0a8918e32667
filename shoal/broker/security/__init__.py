"""The broker's security cores: SASL mechanism servers and the JAAS config parser.

Everything here is pure and deterministic: no sockets, no clock (the time is an argument), so the
connection's authentication state machine and the simulation drive the same code.
"""
