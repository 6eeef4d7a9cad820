"""The tensor basics room: state (URL and cached engine calls), panels, draw."""
