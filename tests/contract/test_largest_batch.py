"""The largest send the limits allow stores on every backend row.

1,000 drafts (``limits.max_seqs_per_call``), each with content at ``max_content_bytes`` and
every id and short text at ``max_id_length``, all in 4-byte characters, topped up with ``ex``
to ``max_message_bytes``: about 71 MB in one call. Before statements were sized by their
encoded bytes, sql-row on MariaDB sent it as one ~70 MB INSERT, over ``max_allowed_packet``,
and the batch could never be stored.
"""

from __future__ import annotations

import pytest

from imbucket.app import MessageService
from imbucket.domain.model import DEFAULT_LIMITS as LIMITS
from imbucket.domain.model import message_bytes
from imbucket.domain.projection import MessageView
from imbucket.testing.factories import WIDE, largest_draft

pytestmark = pytest.mark.slow

CONVERSATION = "sg_" + WIDE * (LIMITS.max_id_length - 3)


# The largest batch through the emulator's asyncio rows can outlast the default per-test timeout.
@pytest.mark.timeout(900)
def test_the_largest_batch_the_limits_allow_is_stored(service: MessageService) -> None:
    drafts = [largest_draft(n) for n in range(LIMITS.max_seqs_per_call)]
    assert message_bytes(drafts[0], LIMITS.max_id_length) > LIMITS.max_message_bytes - 4
    sent = service.send(CONVERSATION, drafts)
    assert [m.seq for m in sent] == list(range(1, len(drafts) + 1))
    assert service.stats().messages == len(drafts)
    # A sample read back whole: a pull of all 1,000 would cost the JSON engines a parse of
    # the ~7 MB bucket per slot (minutes), and proves nothing the count and these do not.
    seqs = [1, 100, 101, 555, 999, 1000]
    views = service.pull(CONVERSATION, "bob", seqs)
    stored = [
        (v.seq, v.message.client_msg_id, v.message.content, v.message.ex)
        for v in views
        if isinstance(v, MessageView)
    ]
    expected = [
        (s, drafts[s - 1].client_msg_id, drafts[s - 1].content, drafts[s - 1].ex) for s in seqs
    ]
    assert stored == expected
