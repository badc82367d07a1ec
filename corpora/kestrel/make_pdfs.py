#!/usr/bin/env python3
"""Regenerate the PDF documents of the Kestrel sample knowledge base.

The text of every PDF lives in this file, so the PDFs in ``docs/`` can be
rebuilt at any time:

    python corpora/kestrel/make_pdfs.py

Requires reportlab (``pip install reportlab``). Output is deterministic
(reportlab's ``invariant`` mode), so rebuilding without editing the text
produces identical files. All content is fictional and was written by the
project team.
"""

from __future__ import annotations

from pathlib import Path

from reportlab import rl_config

rl_config.invariant = 1  # reproducible output: fixed dates and document IDs

from reportlab.lib import colors  # noqa: E402
from reportlab.lib.pagesizes import A4  # noqa: E402
from reportlab.lib.styles import getSampleStyleSheet  # noqa: E402
from reportlab.lib.units import mm  # noqa: E402
from reportlab.platypus import (  # noqa: E402
    ListFlowable,
    ListItem,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

DOCS_DIR = Path(__file__).resolve().parent / "docs"

# Each document is a list of blocks: (kind, payload).
#   ("h1", text) ("h2", text) ("p", text) ("bullets", [text, ...])
#   ("table", [[header...], [row...], ...]) ("pagebreak", None)
# Paragraph text may use reportlab's mini-markup (<b>, <i>); escape & as &amp;.

T9_MANUAL = [
    ("h1", "Kestrel T9 and T9 Pro Smart Thermostat — User Manual"),
    ("p", "Models KT-900 (T9) and KT-950 (T9 Pro). Manual revision 5, June 2025, "
          "for thermostat firmware 4.2 and later."),
    ("h2", "1. About this manual"),
    ("p", "This manual covers both thermostat models. Where the models differ, the "
          "text says so explicitly. Read the safety section before installing. If you "
          "prefer not to install the thermostat yourself, a Kestrel Certified Installer "
          "can do it for you (see Professional Installation Service)."),
    ("h2", "2. What is in the box"),
    ("table", [
        ["Item", "T9 (KT-900)", "T9 Pro (KT-950)"],
        ["Thermostat and base plate", "Yes", "Yes"],
        ["Trim plate (covers old paint marks)", "Yes", "Yes"],
        ["2 x AA lithium batteries", "Yes", "No (built-in rechargeable battery)"],
        ["Wire labels and 4 screws with wall plugs", "Yes", "Yes"],
        ["C-Wire Adapter (KCA-1)", "No, sold separately", "No, sold separately"],
    ]),
    ("h2", "3. Compatibility"),
    ("p", "Both models work with low-voltage (24 VAC) heating and cooling systems: gas, "
          "oil and electric furnaces, boilers, central air conditioning and heat pumps. "
          "<b>Neither model is compatible with line-voltage (120 V or 240 V) systems</b> "
          "such as electric baseboard heaters. Connecting a thermostat to line voltage "
          "will destroy it and is not covered by the warranty."),
    ("bullets", [
        "<b>T9:</b> conventional systems with up to 2 heating stages and 1 cooling stage; "
        "single-stage heat pumps without auxiliary heat. 7 terminals: R, C, W1, W2, Y1, G, O/B.",
        "<b>T9 Pro:</b> up to 3 heating stages and 2 cooling stages; heat pumps with auxiliary "
        "or emergency heat; one accessory (humidifier, dehumidifier or ventilator). "
        "13 terminals: Rh, Rc, C, W1, W2, W3, Y1, Y2, G, O/B, AUX/E, ACC+, ACC-.",
        "Maximum load: 1 A per terminal at 24 VAC.",
    ]),
    ("h2", "4. Power"),
    ("p", "<b>T9:</b> the T9 can run without a C-wire. In that case it is powered by the two "
          "AA lithium batteries, which last up to <b>12 months</b>. When a C-wire is connected "
          "the T9 draws its power from the system and the batteries act as a backup. The "
          "thermostat warns you in the app and on the screen when roughly 3 weeks of battery "
          "life remain. Use lithium AA cells only; alkaline cells shorten battery life to "
          "about 4 months."),
    ("p", "<b>T9 Pro:</b> the T9 Pro <b>requires a C-wire</b> or the C-Wire Adapter (KCA-1). "
          "Its built-in rechargeable lithium-ion battery is a backup: during a power cut it "
          "keeps the screen, the schedule clock and Wi-Fi running for up to <b>8 hours</b>, so "
          "you receive a power-loss alert in the app. The heating and cooling equipment "
          "itself does not run without mains power. The backup battery recharges fully in "
          "about 2 hours once power returns."),
    ("pagebreak", None),
    ("h2", "5. Installing the thermostat"),
    ("bullets", [
        "Switch off the power to the heating and cooling system at the breaker or the "
        "service switch. Confirm the old thermostat's screen is blank.",
        "Remove the old thermostat's cover and take a photo of the wiring. Run the "
        "compatibility check in the Kestrel app with this photo.",
        "Label each wire with the supplied labels, disconnect the wires and remove the old "
        "base. If you find thick wires joined with wire nuts, or a label showing 120 V or "
        "240 V, stop: your system is line voltage and not compatible.",
        "Fix the Kestrel base plate with the supplied screws, using the built-in bubble "
        "level. Connect each wire to the terminal with the same letter.",
        "Attach the thermostat, switch the power back on and follow the set-up steps on "
        "screen and in the app. Installation usually takes about 30 minutes.",
    ]),
    ("p", "Register your thermostat in the app. If it was installed by a Kestrel Certified "
          "Installer, register the installation within 60 days to receive the 3-year "
          "warranty instead of the standard 2 years."),
    ("h2", "6. Technical specifications"),
    ("table", [
        ["Specification", "T9 (KT-900)", "T9 Pro (KT-950)"],
        ["Display", "3.5-inch colour LCD, rotating dial", "4.0-inch colour touchscreen"],
        ["Setpoint range", "4.5–32 °C (40–90 °F)", "4.5–32 °C (40–90 °F)"],
        ["Temperature accuracy", "±0.5 °C", "±0.3 °C"],
        ["Humidity sensor accuracy", "±5% RH", "±3% RH"],
        ["Occupancy sensor", "No", "Yes, passive infrared (PIR)"],
        ["Wi-Fi", "2.4 GHz 802.11 b/g/n", "2.4 GHz and 5 GHz 802.11 a/b/g/n/ac"],
        ["Thread border router", "No", "Yes (up to 16 Thread devices)"],
        ["Remote sensors (S1, KS-10)", "up to 6", "up to 10"],
        ["Power", "C-wire or 2 x AA lithium (up to 12 months)", "C-wire required"],
        ["Backup during power cut", "AA batteries (keep clock and Wi-Fi)", "Rechargeable, up to 8 hours"],
        ["Dimensions", "84 x 84 x 24 mm", "92 x 92 x 26 mm"],
        ["Operating temperature", "0–40 °C", "0–40 °C"],
        ["Warranty", "2 years (3 years with certified installation)", "2 years (3 years with certified installation)"],
    ]),
    ("pagebreak", None),
    ("h2", "7. Everyday features"),
    ("bullets", [
        "<b>Schedules:</b> up to 8 periods per day can be set on the device or in the app.",
        "<b>Eco mode:</b> when you are away, the thermostat sets back the temperature by "
        "4 °C (7 °F) by default. You can change the setback between 1 °C and 8 °C.",
        "<b>Smart Recovery:</b> the thermostat starts heating or cooling early so that the "
        "home reaches the next setpoint on time. It starts no more than 3 hours early.",
        "<b>Compressor protection:</b> after the compressor stops, it will not restart for "
        "5 minutes. Installers can lower this to a minimum of 3 minutes, never to zero.",
        "<b>Without internet:</b> schedules, Eco mode and manual control keep working; only "
        "remote control, reports and alerts pause until the connection returns.",
    ]),
    ("h2", "8. Restart and factory reset"),
    ("table", [
        ["Action", "T9 (KT-900)", "T9 Pro (KT-950)"],
        ["Restart", "Press and hold the dial for 10 seconds", "Settings > Device > Restart, or hold the side button for 5 seconds"],
        ["Factory reset", "Press and hold the dial for 20 seconds", "Settings > Device > Factory reset, or hold the side button for 15 seconds"],
    ]),
    ("p", "A factory reset erases the schedule, Wi-Fi settings and sensor pairings, and "
          "removes the thermostat from your account. Energy history stays in your account."),
    ("h2", "9. Error codes"),
    ("table", [
        ["Code", "Meaning", "What to do"],
        ["E1", "Internal temperature sensor fault", "Restart; if it persists, make a warranty claim"],
        ["E2", "Batteries too low (T9)", "Replace both AA lithium batteries"],
        ["E3", "No power on the R (or Rh/Rc) wire", "Check the breaker, the furnace door switch and the R wire"],
        ["E4", "Heat and cool called at the same time", "Check wiring of W1 and Y1; call an installer"],
        ["E5", "Remote sensor not responding", "Check sensor battery; move sensor within 15 m of the thermostat"],
        ["E6", "Firmware update failed", "Thermostat retries automatically within 24 hours"],
        ["E7", "Wi-Fi password rejected", "Re-enter the password in Settings > Wi-Fi"],
    ]),
    ("h2", "10. Safety"),
    ("p", "Install indoors only. Do not install on an outside wall, above a radiator, or in "
          "direct sunlight, because the readings will be inaccurate. Lithium batteries must "
          "be recycled separately. Warranty details are in the Kestrel Limited Hardware "
          "Warranty Policy; support is available through the app."),
]

ENERGY_PLUS_TERMS = [
    ("h1", "Energy+ Subscription Terms"),
    ("p", "Kestrel Home Systems — effective 1 February 2025. These terms replace the "
          "Energy+ Subscription Terms of 1 September 2023."),
    ("h2", "1. The service and the plans"),
    ("p", "Energy+ is Kestrel's home-energy subscription. It is offered in three plans: "
          "Basic, Plus and Premium. Prices are listed on the current pricing page; on the "
          "effective date they are $4.99, $9.99 and $14.99 per month (US) or $49, $99 and "
          "$149 per year. EU prices are €4.99, €10.99 and €15.99 per month, or €49, €109 and "
          "€159 per year, including VAT. The Energy+ Service Level Agreement, which sets "
          "uptime commitments, support response times and service credits, forms part of "
          "these terms."),
    ("h2", "2. Free trial"),
    ("bullets", [
        "Buyers of a new T9 or T9 Pro thermostat can try Energy+ <b>Plus</b> free for "
        "<b>60 days</b>. The trial must be activated within 30 days of delivery of the "
        "thermostat. Premium and Basic have no free trial.",
        "One free trial per household, based on the service address.",
        "A payment method is required. We email a reminder 7 days before the trial ends.",
        "Unless you cancel before the trial ends, it converts into a monthly Plus plan at "
        "the then-current price. Cancelling during the trial costs nothing.",
        "Returning the thermostat does not end the trial automatically; cancel it in the app.",
    ]),
    ("h2", "3. Billing"),
    ("p", "Plans are billed in advance. Monthly plans are charged on the same day each month "
          "as the day you subscribed; if that day does not exist in a month (29th, 30th or "
          "31st), you are charged on the last day of that month. Annual plans are charged "
          "once per 12-month term and renew automatically. We send a renewal reminder "
          "<b>30 days</b> before an annual plan renews."),
    ("p", "<b>Price changes.</b> We announce price increases by email at least <b>30 days</b> "
          "in advance. The price of an annual plan is locked for its current term; a new "
          "price applies from the next renewal."),
    ("p", "<b>Failed payments.</b> If a payment fails, we retry it 3 times over 14 days. If "
          "all retries fail, the subscription is downgraded to the free tier. Your devices "
          "keep working and your schedules are unaffected."),
    ("pagebreak", None),
    ("h2", "4. Changing plans"),
    ("bullets", [
        "<b>Upgrades</b> (for example Basic to Premium) take effect immediately. You pay the "
        "prorated difference for the rest of the current billing period.",
        "<b>Downgrades</b> take effect at the end of the current billing period. No refund "
        "or credit is given for the remaining period.",
        "Switching between monthly and annual billing takes effect at the next renewal date.",
    ]),
    ("h2", "5. Cancellation and refunds"),
    ("table", [
        ["Plan type", "When you can cancel", "Refund"],
        ["Monthly", "Any time", "None; service continues until the end of the paid month"],
        ["Annual, within 30 days of the start of the term (new or renewed)", "Any time", "Full refund of that term's fee"],
        ["Annual, after the first 30 days of the term", "Any time", "None; service continues until the end of the term"],
        ["Free trial", "Any time before it ends", "Nothing is charged"],
    ]),
    ("p", "EU consumers have a statutory 14-day right of withdrawal from the start of a new "
          "subscription; the 30-day full-refund period for annual plans includes and extends "
          "that right. If you withdraw from a monthly plan within 14 days, we refund the "
          "unused part of the month pro rata."),
    ("h2", "6. Demand-response rewards (Premium)"),
    ("p", "Premium members who enrol in a supported utility demand-response programme earn "
          "<b>$2 (€2) per completed event</b>, up to <b>$60 (€60) per home per calendar "
          "year</b>. An event counts as completed if you do not override the thermostat "
          "during the event. Rewards are paid as Kestrel account credit once a quarter. "
          "If an event cannot be dispatched because of a Kestrel service failure, Kestrel "
          "may still pay the reward at its discretion. Programme availability depends on "
          "your utility; data is shared with the utility only as described in the Privacy "
          "Notice."),
    ("h2", "7. Homes, users and moving house"),
    ("bullets", [
        "Basic and Plus cover one home. Premium covers up to three homes on one account.",
        "Each home can have up to 8 invited users. Guests under 16 have limited rights.",
        "The subscription belongs to the account, not to the home. When you move or sell "
        "your home, remove the home from your account and factory-reset the devices you "
        "leave behind. New occupants need their own account and subscription.",
    ]),
    ("pagebreak", None),
    ("h2", "8. Extended warranty (Premium)"),
    ("p", "While a Premium subscription is active, registered Kestrel devices stay under "
          "warranty as described in the Limited Hardware Warranty Policy (up to 5 years from "
          "delivery). Employees using the free employee Premium plan are excluded from this "
          "benefit under the Employee Purchase Program."),
    ("h2", "9. Acceptable use"),
    ("p", "The service is for residential use. Using one subscription for commercial "
          "property management of more than 3 homes, reselling access, or automated "
          "scraping of the app or API is not permitted. Kestrel may suspend accounts that "
          "break these rules after giving 14 days' notice, except in cases of fraud or "
          "security risk, where suspension can be immediate."),
    ("h2", "10. Liability"),
    ("p", "Kestrel's total liability under these terms for any 12-month period is limited to "
          "the subscription fees you paid in that period, except where the law does not "
          "allow such a limitation (for example for death or personal injury caused by "
          "negligence). Service credits under the SLA are the sole remedy for unavailability "
          "of the Energy+ Service."),
    ("h2", "11. Governing law"),
    ("p", "US customers: the laws of the State of Oregon. EU customers: Dutch law, without "
          "depriving you of the protection of the mandatory consumer law of your country of "
          "residence. Disputes can be raised first with support@kestrelhome.example; we aim "
          "to respond within 10 business days."),
]

PERFORMANCE_GUIDE = [
    ("h1", "Performance Review and Compensation Guide 2025"),
    ("p", "Kestrel Home Systems — People team. Policy HR-031, version 2025.1, effective "
          "1 January 2025. Applies to all regular employees; interns and contractors are "
          "excluded."),
    ("h2", "1. Review calendar"),
    ("table", [
        ["Milestone", "Timing", "Outcome"],
        ["Goal setting", "January", "3 to 5 written goals agreed with the manager"],
        ["Mid-year check-in", "June", "Feedback conversation; no rating"],
        ["Annual review", "November–December", "Rating on the 1–5 scale"],
        ["Calibration", "first two weeks of December", "Ratings compared across teams"],
        ["Merit increases effective", "1 March", "Paid in the March payroll"],
    ]),
    ("p", "Employees who join on or after 1 October are not rated in their first review "
          "cycle; they receive a check-in conversation instead."),
    ("h2", "2. Rating scale"),
    ("table", [
        ["Rating", "Label", "Guideline merit increase (2025)"],
        ["5", "Exceptional", "5.0% to 7.0%"],
        ["4", "Exceeds expectations", "3.5% to 5.0%"],
        ["3", "Meets expectations", "2.0% to 3.5%"],
        ["2", "Partially meets expectations", "0%"],
        ["1", "Does not meet expectations", "0%, plus a performance improvement plan"],
    ]),
    ("p", "The company-wide merit budget for 2025 is <b>3.5%</b> of base salary on average. "
          "Managers may not exceed their team's budget without approval from the VP of "
          "the department and the VP People. Employees below the minimum of their salary "
          "band receive an additional market adjustment of up to 4%, outside the merit "
          "budget."),
    ("h2", "3. Performance improvement plans"),
    ("p", "A performance improvement plan (PIP) lasts <b>60 days</b> and has written goals, "
          "weekly check-ins and a named HR partner. A PIP can be extended once by up to 30 "
          "days. Employees on a PIP are not eligible for promotion or internal transfer "
          "until the plan has been completed successfully."),
    ("pagebreak", None),
    ("h2", "4. Promotions"),
    ("bullets", [
        "Promotion cycles take place twice a year, effective <b>1 April</b> and "
        "<b>1 October</b>.",
        "An employee must have spent at least <b>12 months</b> in their current level "
        "(18 months for promotion to Staff, Principal or Director levels).",
        "The most recent rating must be 4 or 5, or 3 with a documented business case "
        "approved by the VP.",
        "A promotion comes with a base salary increase of at least 8%, or to the minimum "
        "of the new band if that is higher.",
    ]),
    ("h2", "5. Annual bonus"),
    ("table", [
        ["Role level", "Target bonus (% of base salary)"],
        ["Individual contributors", "10%"],
        ["Managers", "15%"],
        ["Directors", "20%"],
        ["Vice presidents", "30%"],
    ]),
    ("p", "The bonus is funded by company performance (60% weight) and individual rating "
          "(40% weight). The company performance factor can range from 0% to 150%. "
          "Employees rated 1 receive no bonus; employees rated 2 receive at most 50% of "
          "target."),
    ("p", "<b>Eligibility:</b> you must start before 1 October of the bonus year and still be "
          "employed on the payment date. Employees who joined during the year receive a "
          "prorated bonus based on calendar days worked. Bonuses are paid in the "
          "<b>March</b> payroll of the following year. Employees who resign before the "
          "payment date are not eligible; employees whose role is eliminated receive a "
          "prorated bonus at 100% company factor."),
    ("h2", "6. Equity"),
    ("p", "New hires in eligible roles receive a stock option grant vesting over 4 years with "
          "a 1-year cliff. Refresh grants are considered annually for employees rated 4 or 5 "
          "and are approved by the board in April."),
    ("h2", "7. Pay transparency"),
    ("p", "Salary bands are visible to all employees in the HR portal. Job postings in the "
          "US include the band range. Employees may ask HR for an explanation of their "
          "position in the band at any time; HR replies within 10 business days."),
]

DOCUMENTS = {
    "t9-thermostat-user-manual.pdf": ("Kestrel T9 and T9 Pro User Manual", T9_MANUAL),
    "energy-plus-subscription-terms.pdf": ("Energy+ Subscription Terms", ENERGY_PLUS_TERMS),
    "performance-review-and-compensation-guide.pdf": (
        "Performance Review and Compensation Guide 2025", PERFORMANCE_GUIDE),
}


def _flowables(blocks, styles):
    body = styles["BodyText"]
    cell = styles["BodyText"].clone("cell", fontSize=8.5, leading=10.5)
    head_cell = cell.clone("headcell", fontName="Helvetica-Bold")
    out = []
    for kind, payload in blocks:
        if kind == "h1":
            out.append(Paragraph(payload, styles["Title"]))
        elif kind == "h2":
            out.append(Paragraph(payload, styles["Heading2"]))
        elif kind == "p":
            out.append(Paragraph(payload, body))
        elif kind == "bullets":
            out.append(ListFlowable(
                [ListItem(Paragraph(t, body), leftIndent=12) for t in payload],
                bulletType="bullet", start="•", leftIndent=12))
        elif kind == "table":
            rows = [[Paragraph(c, head_cell if i == 0 else cell) for c in row]
                    for i, row in enumerate(payload)]
            ncol = len(payload[0])
            width = (A4[0] - 40 * mm) / ncol
            t = Table(rows, colWidths=[width] * ncol, repeatRows=1)
            t.setStyle(TableStyle([
                ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8f0f5")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]))
            out.append(t)
            out.append(Spacer(1, 4 * mm))
        elif kind == "pagebreak":
            out.append(PageBreak())
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    return out


def build(name, title, blocks):
    styles = getSampleStyleSheet()

    def footer(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(20 * mm, 12 * mm, f"Kestrel Home Systems — {title}")
        canvas.drawRightString(A4[0] - 20 * mm, 12 * mm, f"Page {doc.page}")
        canvas.restoreState()

    path = DOCS_DIR / name
    doc = SimpleDocTemplate(
        str(path), pagesize=A4, title=title, author="Kestrel Home Systems (fictional)",
        leftMargin=20 * mm, rightMargin=20 * mm, topMargin=18 * mm, bottomMargin=20 * mm)
    doc.build(_flowables(blocks, styles), onFirstPage=footer, onLaterPages=footer)
    return path


def main():
    DOCS_DIR.mkdir(parents=True, exist_ok=True)
    for name, (title, blocks) in DOCUMENTS.items():
        print(build(name, title, blocks))


if __name__ == "__main__":
    main()
