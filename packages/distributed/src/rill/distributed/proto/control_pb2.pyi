from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class JobDoneRequest(_message.Message):
    __slots__ = ("reason", "grace_secs", "from_task", "broadcast")
    REASON_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECS_FIELD_NUMBER: _ClassVar[int]
    FROM_TASK_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    reason: str
    grace_secs: float
    from_task: str
    broadcast: bool
    def __init__(self, reason: _Optional[str] = ..., grace_secs: _Optional[float] = ..., from_task: _Optional[str] = ..., broadcast: _Optional[bool] = ...) -> None: ...

class JobDoneResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
