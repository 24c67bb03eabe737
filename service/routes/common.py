"""What every route needs from the app state, and the checks they share."""

from __future__ import annotations

from fastapi import HTTPException, Request

from service.config import Settings


def settings_of(request: Request) -> Settings:
    return request.app.state.settings


def check_question_length(request: Request, question: str) -> None:
    limit = settings_of(request).max_question_chars
    if len(question) > limit:
        raise HTTPException(422, f"question longer than {limit} characters")
