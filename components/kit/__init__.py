"""The room kit: the parts every room is written from (one module per part).

- :mod:`components.kit.link_state`: a room's shared link, from its declaration
  (:class:`torchatlas.links.LinkSpec`): read once, written on change, broken-link notice.
- :mod:`components.kit.error_card`: one way to show a room's coded error or a sandbox failure.
- :mod:`components.kit.predict_reveal`: a question, the visitor's prediction, torch's answer.
- :mod:`components.kit.code_editor`: the pasted-code box with its presets and queue reporter.
- :mod:`components.kit.focus`: where a reader's eyes go (scroll to what opened, once; phone-
  sized options; Korean line breaks; a phone's sidebar closed; a cookie the browser keeps).
"""
